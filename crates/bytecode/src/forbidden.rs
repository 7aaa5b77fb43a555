//! The property names no AJS program may touch: the compiler refuses them where they are
//! written, the VM where a key is computed at run time. Nothing else in the workspace lists them.

/// Names no program may read, write or define a property by (they reach the host's prototype
/// machinery in JavaScript).
pub const FORBIDDEN_NAMES: [&str; 3] = ["constructor", "__proto__", "prototype"];

/// The message of the error refusing forbidden name `name`.
pub fn forbidden_message(name: &str) -> String {
    format!("Security Error: Access to '{name}' is forbidden")
}
