# Cross toolchain: Debian 12 amd64 -> arm64 (aarch64): Raspberry Pi 3, 4, 5, Zero 2 W and
# Compute Modules 3/4/5 running a 64-bit OS. Compiler from crossbuild-essential-arm64.
#
# Libraries come from one of:
#  - a multiarch build machine (dpkg --add-architecture arm64; the -dev packages installed as
#    :arm64; docs/DEPLOY.md lists them). Leave RXFLEET_SYSROOT unset.
#  - a sysroot made of the arm64 packages (scripts/cross-build makes one with mmdebstrap):
#    -DRXFLEET_SYSROOT=/path or the environment variable of the same name.
# Used by scripts/cross-build; by hand:
#   cmake --preset release -B build/arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake

set(RXFLEET_CROSS_TRIPLET aarch64-linux-gnu)
set(RXFLEET_DEB_ARCH arm64 CACHE STRING "Debian architecture of the packages")
set(CMAKE_SYSTEM_PROCESSOR aarch64)
include(${CMAKE_CURRENT_LIST_DIR}/debian-cross.cmake)
