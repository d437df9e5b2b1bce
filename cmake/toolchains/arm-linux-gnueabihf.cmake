# Cross toolchain: Debian 12 amd64 -> armhf (ARMv7-A, VFPv3-D16, Thumb-2): Raspberry Pi 2 v1.1
# and later, 3, 4, 5 and Zero 2 W running a 32-bit OS. Compiler from crossbuild-essential-armhf.
#
# NOT for ARMv6 boards (Pi 1 A/B/A+/B+, Zero, Zero W, Compute Module 1): Debian's armhf baseline
# is ARMv7, so its compiler and libraries execute instructions an ARMv6 core lacks. Those boards
# build natively on Raspberry Pi OS (its armhf is ARMv6 + VFPv2): docs/DEPLOY.md.
#
# Libraries: multiarch (dpkg --add-architecture armhf) or RXFLEET_SYSROOT, as for arm64.
#   cmake --preset release -B build/armhf -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/arm-linux-gnueabihf.cmake

set(RXFLEET_CROSS_TRIPLET arm-linux-gnueabihf)
set(RXFLEET_DEB_ARCH armhf CACHE STRING "Debian architecture of the packages")
set(CMAKE_SYSTEM_PROCESSOR arm)
include(${CMAKE_CURRENT_LIST_DIR}/debian-cross.cmake)
