//! A tar reader for hostile input: a pure header parser ([`header`], [`pax`]) behind one
//! blocking reader ([`reader`]). Every header is checked (checksum, numbers, type) and every
//! size counted against the import's [`Budget`](crate::bounds::Budget) before a body byte is
//! read; GNU long names and PAX records are read only up to a small cap. Sparse files,
//! multi-volume archives and unknown entry types are refused, never guessed at.
pub mod header;
pub mod pax;
pub mod reader;

pub use header::{Header, Kind, BLOCK};
pub use reader::{Entry, TarReader};
