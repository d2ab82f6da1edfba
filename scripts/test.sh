#!/usr/bin/env bash
# Runs every check rmx has, installing what they need first:
# formatting, clippy, the core's bare-metal build, all tests, fuzz smoke runs.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "toolchain: components, bare-metal target, nightly for cargo-fuzz"
rustup component add rustfmt clippy >/dev/null 2>&1 || true
rustup target list --installed | grep -qx x86_64-unknown-none || rustup target add x86_64-unknown-none
# Install nightly only if missing: installing over an existing one would update it.
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

step "format"
cargo fmt --all -- --check
(cd fuzz && cargo fmt -- --check)

step "clippy"
cargo clippy --workspace --all-targets -- -D warnings

step "rmx-core on x86_64-unknown-none (no_std, no alloc)"
cargo build -p rmx-core --target x86_64-unknown-none
cargo build -p rmx-core --target x86_64-unknown-none --features log
cargo build -p rmx-core --target x86_64-unknown-none --features defmt

step "tests (unit, property, model, simulator, loop transport, command line)"
cargo test --workspace --release

step "fuzz smoke runs"
for t in decode_header endpoint_packets; do
    (cd fuzz && cargo +nightly fuzz run "$t" -O -- -max_total_time="${RMX_FUZZ_SECONDS:-15}" 2>&1 | grep -E '^Done|ERROR|SUMMARY' || true)
    if ls fuzz/artifacts/"$t"/crash-* >/dev/null 2>&1; then
        echo "fuzz target $t crashed: see fuzz/artifacts/$t" >&2
        exit 1
    fi
done

step "all checks passed"
