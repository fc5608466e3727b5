//! What the layer keeps per device, as plain data with the decisions made on it; no call goes down
//! the chain from here. Above the leaves (`config`, `log`, `loader`, `chain`), below `dispatch`,
//! whose per-device data holds these.

pub(crate) mod bindings;
pub(crate) mod commands;
pub(crate) mod extensions;
pub(crate) mod fault;
