//! `spec.image` on the wire: the name of an image in the server's store. Only its shape is
//! checked here; the local backend looks it up at create (an unknown name is refused there).

/// Longest image name (the store's own bound, `airlock_image::valid_name`).
const MAX_NAME: usize = 128;

/// The name, or the `invalid_params` message.
pub fn checked(name: String) -> Result<String, String> {
    let ok = airlock_image::valid_name(&name);
    if ok {
        Ok(name)
    } else {
        Err(format!(
            "spec.image {name:?}: 1 to {MAX_NAME} characters of [A-Za-z0-9._:-], starting with a \
             letter or digit"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_shaped_like_the_store_wants() {
        assert!(checked("pandas:1".into()).is_ok());
        for bad in ["", "../etc", "a/b", ".x", &"a".repeat(129)] {
            assert!(checked(bad.into()).is_err(), "{bad}");
        }
    }
}
