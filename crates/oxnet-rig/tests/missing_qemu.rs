//! Without QEMU the rig fails, and says how to install it. (Its own test
//! binary: it changes an environment variable of the process.)

#[test]
fn missing_qemu_is_an_error_naming_the_install_script() {
    std::env::set_var("OXNET_RIG_QEMU", "/nonexistent/qemu-system-x86_64");
    let error = oxnet_rig::Vm::new().run("true").expect_err("ran without QEMU");
    let message = error.to_string();
    assert!(matches!(error, oxnet_rig::Error::Missing(_)), "{message}");
    assert!(message.contains("scripts/rig/install-deps.sh"), "{message}");
    assert!(oxnet_rig::check_installed().is_err());
}
