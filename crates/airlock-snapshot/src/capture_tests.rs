use std::io::Write;

use super::*;
use crate::bounds::Bounds;
use crate::payload::Input;

fn walk_content(file_bytes: &[u8], declared: u64) -> (u64, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, file_bytes).unwrap();
    let mut f = std::fs::File::open(&path).unwrap();
    let mut out = Vec::new();
    let mut budget = Budget::new(Bounds::default());
    let mut walk = Walk {
        out: &mut out,
        budget: &mut budget,
        stats: Captured::default(),
        buf: vec![0u8; CHUNK_LEN],
    };
    let n = walk.content(&mut f, declared).unwrap();
    payload::put_chunks_end(&mut out).unwrap();
    (n, out)
}

fn chunks_of(out: &[u8]) -> Vec<u8> {
    let mut input = Input::new(out);
    let mut all = Vec::new();
    loop {
        let len = input.chunk_len().unwrap();
        if len == 0 {
            break;
        }
        let mut b = vec![0u8; len];
        input.read_some(&mut b).unwrap();
        all.extend_from_slice(&b);
    }
    input.expect_end().unwrap();
    all
}

/// A file that shrank after its size was taken: only what is there, framed exactly.
#[test]
fn a_file_that_shrank_yields_what_is_there() {
    let data = vec![7u8; CHUNK_LEN + 10];
    let (n, out) = walk_content(&data, 3 * CHUNK_LEN as u64);
    assert_eq!(n, data.len() as u64);
    assert_eq!(chunks_of(&out), data);
}

/// A file that grew after its size was taken: clipped at that size.
#[test]
fn a_file_that_grew_is_clipped_at_its_size() {
    let data: Vec<u8> = (0..CHUNK_LEN * 2 + 5).map(|i| i.to_le_bytes()[0]).collect();
    let (n, out) = walk_content(&data, CHUNK_LEN as u64 + 1);
    assert_eq!(n, CHUNK_LEN as u64 + 1);
    assert_eq!(chunks_of(&out), &data[..CHUNK_LEN + 1]);
}

#[test]
fn capture_records_are_sorted_and_closed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("work")).unwrap();
    for name in ["b", "a", "c"] {
        let mut f = std::fs::File::create(dir.path().join("work").join(name)).unwrap();
        f.write_all(name.as_bytes()).unwrap();
    }
    let root = DirFd::open(dir.path()).unwrap();
    let tree = Tree {
        root: &root,
        dirs: &["work"],
    };
    let mut out = Vec::new();
    let mut budget = Budget::new(Bounds::default());
    let stats = capture_tree(Some(tree), &mut out, &mut budget).unwrap();
    assert_eq!((stats.dirs, stats.files, stats.bytes), (1, 3, 3));
    let names: Vec<usize> = ["a", "b", "c"]
        .iter()
        .map(|n| {
            out.windows(3)
                .position(|w| w == [tag::FILE, 1, n.as_bytes()[0]])
                .unwrap()
        })
        .collect();
    assert!(names.windows(2).all(|w| w[0] < w[1]), "not in name order");
    assert_eq!(out[out.len() - 17], tag::END);
    assert_eq!(out[out.len() - 18], tag::UP);
}
