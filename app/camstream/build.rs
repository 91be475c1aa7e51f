//! With the `libcamera` feature: compiles the C++ shim over libcamera's API
//! (no bindgen: the shim's C API is declared by hand in ffi.rs) against the
//! libcamera pkg-config finds, which also says what to link.

fn main() {
    #[cfg(feature = "libcamera")]
    {
        let shim = "src/source/libcamera/shim.cpp";
        println!("cargo::rerun-if-changed={shim}");
        let lib = pkg_config::Config::new()
            .atleast_version("0.0.3")
            // Linked after the shim, which needs them (--as-needed).
            .cargo_metadata(false)
            .probe("libcamera")
            .expect("libcamera's development files (pkg-config libcamera)");
        let mut build = cc::Build::new();
        build.cpp(true).std("c++17").file(shim).warnings(true);
        for dir in &lib.include_paths {
            build.include(dir);
        }
        build.compile("camstream_libcamera");
        for dir in &lib.link_paths {
            println!("cargo::rustc-link-search=native={}", dir.display());
        }
        for l in &lib.libs {
            println!("cargo::rustc-link-lib={l}");
        }
    }
}
