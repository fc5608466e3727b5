//! Keeps the reporter's table of mesh users ([`AssetUsers`]) from Bevy's observers on `Mesh3d` and
//! `Name`: work only when such a component is inserted, replaced or removed, none per frame.

use bevy::mesh::Mesh3d;
use bevy::prelude::*;
use gpu_crash_core::{AssetUsers, MeshUser};

use super::asset_key;

fn mesh_user(entity: Entity) -> MeshUser {
    MeshUser {
        id: entity.to_bits(),
        shown_as: entity.to_string(),
    }
}

/// Adds the observers to the main world.
pub(crate) fn observe(app: &mut App, users: AssetUsers) {
    let on_insert = users.clone();
    let on_discard = users.clone();
    app.add_observer(
        move |event: On<Insert, Mesh3d>, meshes: Query<(&Mesh3d, Option<&Name>)>| {
            if let Ok((mesh, name)) = meshes.get(event.entity) {
                on_insert.add(
                    mesh_user(event.entity),
                    asset_key(mesh.id()),
                    name.map(|n| n.as_str().to_owned()),
                );
            }
        },
    );
    app.add_observer(move |event: On<Discard, Mesh3d>| on_discard.remove(event.entity.to_bits()));
    app.add_observer(move |event: On<Insert, Name>, names: Query<&Name>| {
        if let Ok(name) = names.get(event.entity) {
            users.rename(event.entity.to_bits(), name.as_str());
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
        let handle = || Handle::<Mesh>::Uuid(uuid::Uuid::from_u128(7), Default::default());
        let tree = asset_key(handle().id());
        let world = app.world_mut();
        let a = world.spawn((Mesh3d(handle()), Name::new("oak"))).id();
        let b = world.spawn(Mesh3d(handle())).id();
        let (listed, count) = users.users_of(tree).unwrap();
        assert_eq!(count, 2);
        assert_eq!(listed[0].1.as_deref(), Some("oak"));
        world.entity_mut(b).insert(Name::new("birch"));
        let (listed, _) = users.users_of(tree).unwrap();
        assert_eq!(listed[1].1.as_deref(), Some("birch"));
        world.despawn(a);
        let (listed, count) = users.users_of(tree).unwrap();
        assert_eq!((listed.len(), count), (1, 1));
        world.entity_mut(b).remove::<Mesh3d>();
        assert_eq!(users.users_of(tree).unwrap().1, 0);
    }
}
