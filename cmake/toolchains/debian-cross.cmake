# Shared part of the Debian cross toolchains. Set before including:
#   RXFLEET_CROSS_TRIPLET  GNU triplet = Debian multiarch tuple (aarch64-linux-gnu, ...)
#   CMAKE_SYSTEM_PROCESSOR
# Optional: RXFLEET_SYSROOT (cache or environment): a directory holding the target's /usr tree.

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_C_COMPILER ${RXFLEET_CROSS_TRIPLET}-gcc)
set(CMAKE_CXX_COMPILER ${RXFLEET_CROSS_TRIPLET}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${RXFLEET_CROSS_TRIPLET})

if(NOT RXFLEET_SYSROOT AND DEFINED ENV{RXFLEET_SYSROOT})
  set(RXFLEET_SYSROOT $ENV{RXFLEET_SYSROOT})
endif()
set(RXFLEET_SYSROOT "${RXFLEET_SYSROOT}" CACHE PATH "Target sysroot (empty: multiarch host)")
# try_compile projects get a fresh cache: hand the sysroot down.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES RXFLEET_SYSROOT RXFLEET_CROSS_TRIPLET)

if(RXFLEET_SYSROOT)
  set(CMAKE_SYSROOT ${RXFLEET_SYSROOT})
  set(CMAKE_FIND_ROOT_PATH ${RXFLEET_SYSROOT})
  set(pkg_root ${RXFLEET_SYSROOT})
else()
  # Multiarch: target libraries in /usr/lib/<triplet>, headers in /usr/include (+ /<triplet>).
  set(CMAKE_FIND_ROOT_PATH /)
  set(pkg_root "")
endif()

# Programs (protoc, grpc_cpp_plugin) run on the build machine; everything else is the target's.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config (libusb-1.0, libsystemd, umockdev): only the target's .pc files.
set(ENV{PKG_CONFIG_DIR} "")
set(ENV{PKG_CONFIG_LIBDIR}
    "${pkg_root}/usr/lib/${RXFLEET_CROSS_TRIPLET}/pkgconfig:${pkg_root}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${pkg_root}")

# Binaries built for the target cannot run here: tests are off in cross builds unless an
# emulator is configured (qemu-user, -DCMAKE_CROSSCOMPILING_EMULATOR=qemu-aarch64 -L SYSROOT).
