//! File permissions that bind tests run as root (CI runs as root): for the tests of files a
//! player's machine may refuse to open or delete.

#[cfg(target_os = "linux")]
/// Takes CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH out of this thread's effective capabilities, so
/// file permissions apply to it even as root (CI runs as root). Only this thread changes (the raw
/// syscalls act per thread); a process without them is left as it is.
pub fn drop_file_permission_override() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    const DAC_OVERRIDE_AND_READ_SEARCH: u32 = (1 << 1) | (1 << 2);
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget writes two `Data` (version 3) for this thread into `data`.
    let got = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut Header,
            data.as_mut_ptr(),
        )
    };
    assert_eq!(got, 0, "capget: {}", std::io::Error::last_os_error());
    data[0].effective &= !DAC_OVERRIDE_AND_READ_SEARCH;
    // SAFETY: capset reads the header and two `Data`; it only lowers this thread's effective set.
    let set = unsafe { libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) };
    assert_eq!(set, 0, "capset: {}", std::io::Error::last_os_error());
}
