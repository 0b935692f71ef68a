//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package conduit

// nativeLE: this architecture stores words little-endian, as a
// reduction's vectors are packed (appendVec).
const nativeLE = true
