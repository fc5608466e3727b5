//! Which entities draw each mesh (`Mesh3d`), with their `Name`s, so a report says who used the mesh a
//! fault is in. Kept by observers on `Mesh3d` and `Name`: work only when such a component is
//! inserted, replaced or removed, none per frame.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bevy::asset::AssetId;
use bevy::mesh::{Mesh, Mesh3d};
use bevy::prelude::*;

use crate::report::AssetUser;

/// Entities kept by name per mesh; the rest are only counted.
pub(crate) const USERS_LISTED: usize = 8;

#[derive(Default)]
struct MeshUsers {
    listed: Vec<(Entity, Option<String>)>,
    count: u32,
}

#[derive(Default)]
struct Table {
    meshes: HashMap<AssetId<Mesh>, MeshUsers>,
    mesh_of: HashMap<Entity, AssetId<Mesh>>,
}

/// See the module documentation. Shared by the main world (observers) and the crash path.
#[derive(Resource, Clone, Default)]
pub(crate) struct AssetUsers(Arc<Mutex<Table>>);

impl AssetUsers {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tries the lock for a while; `None` when the main thread holds it longer (the crash path must
    /// not wait on the game).
    pub(crate) fn users_of(&self, mesh: AssetId<Mesh>) -> Option<(Vec<AssetUser>, u32)> {
        let table = crate::crash::bounded::try_lock_for(&self.0, LOCK_WAIT)?;
        Some(table.meshes.get(&mesh).map_or((Vec::new(), 0), |u| {
            (
                u.listed
                    .iter()
                    .map(|(e, name)| AssetUser {
                        entity: e.to_string(),
                        name: name.clone(),
                    })
                    .collect(),
                u.count,
            )
        }))
    }

    fn add(&self, entity: Entity, mesh: AssetId<Mesh>, name: Option<String>) {
        let mut table = self.lock();
        Self::remove_locked(&mut table, entity);
        table.mesh_of.insert(entity, mesh);
        let users = table.meshes.entry(mesh).or_default();
        users.count += 1;
        if users.listed.len() < USERS_LISTED {
            users.listed.push((entity, name));
        }
    }

    fn remove(&self, entity: Entity) {
        Self::remove_locked(&mut self.lock(), entity);
    }

    fn remove_locked(table: &mut Table, entity: Entity) {
        let Some(mesh) = table.mesh_of.remove(&entity) else {
            return;
        };
        if let Some(users) = table.meshes.get_mut(&mesh) {
            users.count = users.count.saturating_sub(1);
            users.listed.retain(|(e, _)| *e != entity);
            if users.count == 0 {
                table.meshes.remove(&mesh);
            }
        }
    }

    fn rename(&self, entity: Entity, name: &str) {
        let mut table = self.lock();
        let Some(mesh) = table.mesh_of.get(&entity).copied() else {
            return;
        };
        if let Some(users) = table.meshes.get_mut(&mesh) {
            for (e, n) in &mut users.listed {
                if *e == entity {
                    *n = Some(name.to_owned());
                }
            }
        }
    }
}

/// How long the crash path waits for the table's lock (held by observers for microseconds).
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// Adds the observers to the main world.
pub(crate) fn observe(app: &mut App, users: AssetUsers) {
    let on_insert = users.clone();
    let on_discard = users.clone();
    app.add_observer(
        move |event: On<Insert, Mesh3d>, meshes: Query<(&Mesh3d, Option<&Name>)>| {
            if let Ok((mesh, name)) = meshes.get(event.entity) {
                on_insert.add(event.entity, mesh.id(), name.map(|n| n.as_str().to_owned()));
            }
        },
    );
    app.add_observer(move |event: On<Discard, Mesh3d>| on_discard.remove(event.entity));
    app.add_observer(move |event: On<Insert, Name>, names: Query<&Name>| {
        if let Ok(name) = names.get(event.entity) {
            users.rename(event.entity, name.as_str());
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observers_follow_spawns_renames_and_despawns() {
        let mut app = App::new();
        app.add_plugins(MinimalPlugins);
        let users = AssetUsers::default();
        observe(&mut app, users.clone());
        let tree: AssetId<Mesh> = AssetId::Uuid {
            uuid: uuid::Uuid::from_u128(7),
        };
        let world = app.world_mut();
        let a = world
            .spawn((
                Mesh3d(Handle::Uuid(uuid::Uuid::from_u128(7), Default::default())),
                Name::new("oak"),
            ))
            .id();
        let b = world
            .spawn(Mesh3d(Handle::Uuid(
                uuid::Uuid::from_u128(7),
                Default::default(),
            )))
            .id();
        let (listed, count) = users.users_of(tree).unwrap();
        assert_eq!(count, 2);
        assert_eq!(listed[0].name.as_deref(), Some("oak"));
        world.entity_mut(b).insert(Name::new("birch"));
        let (listed, _) = users.users_of(tree).unwrap();
        assert_eq!(listed[1].name.as_deref(), Some("birch"));
        world.despawn(a);
        let (listed, count) = users.users_of(tree).unwrap();
        assert_eq!((listed.len(), count), (1, 1));
        world.entity_mut(b).remove::<Mesh3d>();
        assert_eq!(users.users_of(tree).unwrap().1, 0);
    }
}
