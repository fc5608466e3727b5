//! Which of the application's objects draw each mesh (Bevy: the entities with a `Mesh3d`, with their
//! `Name`s), so a report says who used the mesh a fault is in. The application tells the table when
//! a user starts, stops or is renamed: work only then, none per frame.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::map::AssetKey;

/// Users kept by name per mesh; the rest are only counted.
pub(crate) const USERS_LISTED: usize = 8;

/// One user of a mesh as the application identifies it: an id that stays the same while it lives
/// (Bevy: `Entity::to_bits`) and how a report shows it (Bevy: `Entity`'s `Display`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeshUser {
    /// Stable while the user lives; compared, never shown.
    pub id: u64,
    /// How a report shows it, e.g. `42v1`.
    pub shown_as: String,
}

/// Users of one mesh as a report lists them: each with its name, if it has one.
pub type ListedUsers = Vec<(MeshUser, Option<String>)>;

#[derive(Default)]
struct MeshUsers {
    listed: ListedUsers,
    count: u32,
}

#[derive(Default)]
struct Table {
    meshes: HashMap<AssetKey, MeshUsers>,
    mesh_of: HashMap<u64, AssetKey>,
}

/// See the module documentation. Shared by the application's side (which keeps it) and the crash
/// path (which reads it).
#[derive(Clone, Default)]
pub struct AssetUsers(Arc<Mutex<Table>>);

/// How long the crash path waits for the table's lock (held by the application for microseconds).
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

impl AssetUsers {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The users of `mesh` a report lists (at most 8, each with its name) and how many there
    /// are. Tries the lock for a while; `None` when the application holds it longer (the crash
    /// path must not wait on the game).
    pub fn users_of(&self, mesh: AssetKey) -> Option<(ListedUsers, u32)> {
        let table = crate::time_box::try_lock_for(&self.0, LOCK_WAIT)?;
        Some(
            table
                .meshes
                .get(&mesh)
                .map_or((Vec::new(), 0), |u| (u.listed.clone(), u.count)),
        )
    }

    /// `user` draws `mesh` from now on (instead of any mesh it drew before), named `name`.
    pub fn add(&self, user: MeshUser, mesh: AssetKey, name: Option<String>) {
        let mut table = self.lock();
        Self::remove_locked(&mut table, user.id);
        table.mesh_of.insert(user.id, mesh);
        let users = table.meshes.entry(mesh).or_default();
        users.count += 1;
        if users.listed.len() < USERS_LISTED {
            users.listed.push((user, name));
        }
    }

    /// The user with this id draws no mesh any more.
    pub fn remove(&self, user_id: u64) {
        Self::remove_locked(&mut self.lock(), user_id);
    }

    fn remove_locked(table: &mut Table, user_id: u64) {
        let Some(mesh) = table.mesh_of.remove(&user_id) else {
            return;
        };
        if let Some(users) = table.meshes.get_mut(&mesh) {
            users.count = users.count.saturating_sub(1);
            users.listed.retain(|(u, _)| u.id != user_id);
            if users.count == 0 {
                table.meshes.remove(&mesh);
            }
        }
    }

    /// The user with this id is now called `name`.
    pub fn rename(&self, user_id: u64, name: &str) {
        let mut table = self.lock();
        let Some(mesh) = table.mesh_of.get(&user_id).copied() else {
            return;
        };
        if let Some(users) = table.meshes.get_mut(&mesh) {
            for (u, n) in &mut users.listed {
                if u.id == user_id {
                    *n = Some(name.to_owned());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(id: u64) -> MeshUser {
        MeshUser {
            id,
            shown_as: format!("{id}v1"),
        }
    }

    #[test]
    fn users_follow_adds_renames_and_removals() {
        let users = AssetUsers::default();
        let tree = AssetKey::Uuid(7);
        users.add(user(1), tree, Some("oak".into()));
        users.add(user(2), tree, None);
        let (listed, count) = users.users_of(tree).unwrap();
        assert_eq!(count, 2);
        assert_eq!(listed[0].1.as_deref(), Some("oak"));
        users.rename(2, "birch");
        let (listed, _) = users.users_of(tree).unwrap();
        assert_eq!(listed[1].1.as_deref(), Some("birch"));
        users.remove(1);
        let (listed, count) = users.users_of(tree).unwrap();
        assert_eq!((listed.len(), count), (1, 1));
        users.add(user(2), AssetKey::Slot(3), None);
        assert_eq!(users.users_of(tree).unwrap().1, 0, "moved to another mesh");
    }
}
