# Shared by the host scripts: install what a fresh Debian 12 machine lacks.
# shellcheck shell=sh

# Runs a command as root (directly, or through sudo).
as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Installs the Debian packages given that are not installed yet.
need_packages() {
    missing=""
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
    done
    if [ -n "$missing" ]; then
        echo "Installing Debian packages:$missing"
        as_root apt-get update -q
        # shellcheck disable=SC2086 # one word per package
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
    fi
}

# Makes rustup's cargo available with the toolchain app/rust-toolchain.toml
# pins (and the components it lists).
ensure_rust() {
    [ -d "$HOME/.cargo/bin" ] && PATH="$HOME/.cargo/bin:$PATH"
    if ! command -v rustup >/dev/null 2>&1; then
        need_packages ca-certificates curl
        arch=$(uname -m)
        echo "Installing rustup"
        tmp=$(mktemp)
        curl --proto '=https' --tlsv1.2 -sSf \
            "https://static.rust-lang.org/rustup/dist/$arch-unknown-linux-gnu/rustup-init" -o "$tmp"
        chmod +x "$tmp"
        "$tmp" -y --profile minimal --default-toolchain none --no-modify-path
        rm -f "$tmp"
        PATH="$HOME/.cargo/bin:$PATH"
    fi
    export PATH
    channel=$(sed -n 's/^channel = "\(.*\)"/\1/p' "$ROOT/app/rust-toolchain.toml")
    rustup toolchain install "$channel" --profile minimal --component clippy,rustfmt
}

# Builds the release binary of camstream (linked against libturbojpeg).
build_camstream() {
    need_packages gcc libc6-dev pkg-config libturbojpeg0-dev
    ensure_rust
    (cd "$ROOT/app" && cargo build --release --locked -p camstream)
}
