//! Bevy's mesh slab buffers by their debug label: `general mesh slab 3 (vertex buffer)` and
//! `large mesh slab 7 (index buffer)` (bevy_render 0.19.1 `slab_allocator.rs`: `"{general|large}
//! {item} slab {id} ({usage}buffer)"`). The label is all a GPU fault gives us of the buffer; the slab
//! id in it keys the asset map, and ids are never reused within a run.

/// A mesh slab buffer, from its label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MeshSlabLabel {
    /// Bevy's `SlabId`.
    pub slab: u32,
    /// A large-object slab (one mesh's data alone) rather than a shared general slab.
    pub large: bool,
}

impl MeshSlabLabel {
    /// Parses `general mesh slab 3 (vertex buffer)`; anything else is not a mesh slab.
    pub(crate) fn parse(label: &str) -> Option<Self> {
        let (large, rest) = if let Some(rest) = label.strip_prefix("general mesh slab ") {
            (false, rest)
        } else {
            (true, label.strip_prefix("large mesh slab ")?)
        };
        let (id, usage) = rest.split_once(' ')?;
        if !(usage.starts_with('(') && usage.ends_with("buffer)")) {
            return None;
        }
        Some(Self {
            slab: id.parse().ok()?,
            large,
        })
    }

    /// `general mesh slab 3`: how a report names the container.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{} mesh slab {}",
            if self.large { "large" } else { "general" },
            self.slab
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bevy_slab_labels_and_nothing_else() {
        let general = MeshSlabLabel::parse("general mesh slab 3 (vertex buffer)").unwrap();
        assert_eq!((general.slab, general.large), (3, false));
        assert_eq!(general.describe(), "general mesh slab 3");
        let large = MeshSlabLabel::parse("large mesh slab 12 (index buffer)").unwrap();
        assert_eq!((large.slab, large.large), (12, true));
        assert!(MeshSlabLabel::parse("general mesh slab 4 (buffer)").is_some());
        for other in [
            "particles",
            "general mesh slab x (vertex buffer)",
            "general mesh slab 3",
            "mesh slab resize encoder",
            "general mesh slab 3 (vertex buffer) copy",
        ] {
            assert_eq!(MeshSlabLabel::parse(other), None, "{other}");
        }
    }
}
