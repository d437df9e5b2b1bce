# Compiler flags shared by every rxfleet target, and helpers to declare targets and tests.

add_library(rxfleet_warnings INTERFACE)
# -Wshadow=local is GCC's spelling; clang (the fuzz preset) does not know it.
target_compile_options(rxfleet_warnings INTERFACE -Wall -Wextra -Wpedantic
  $<$<CXX_COMPILER_ID:GNU>:-Wshadow=local> -Wnon-virtual-dtor -Wimplicit-fallthrough)
if(RXFLEET_WERROR)
  target_compile_options(rxfleet_warnings INTERFACE -Werror)
endif()

if(RXFLEET_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# rxfleet_library(NAME SOURCES ... [DEPS ...])
#   A static library of project code, with the repository root on its include path.
function(rxfleet_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR}/generated)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE rxfleet_warnings)
endfunction()

# rxfleet_test(NAME SOURCES ... DEPS ... LABEL unit|emulated|integration|e2e
#              [WRAPPER cmd...] [ENV VAR=value ...] [TIMEOUT seconds])
#   A GoogleTest binary registered as one ctest test carrying LABEL.
#   WRAPPER prefixes the command (e.g. the emulator for `emulated` tests).
function(rxfleet_test name)
  cmake_parse_arguments(ARG "" "LABEL;TIMEOUT" "SOURCES;DEPS;WRAPPER;ENV" ${ARGN})
  if(NOT ARG_LABEL)
    message(FATAL_ERROR "rxfleet_test(${name}): LABEL is required")
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  # A build that runs only some labels (the sanitizer preset runs unit and emulated tests)
  # leaves the other test binaries out of `all`.
  if(RXFLEET_TEST_LABELS AND NOT ARG_LABEL IN_LIST RXFLEET_TEST_LABELS)
    set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL TRUE)
  endif()
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR}/generated)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main rxfleet_warnings)
  add_test(NAME ${name} COMMAND ${ARG_WRAPPER} $<TARGET_FILE:${name}>)
  set(env "RXFLEET_SOURCE_DIR=${PROJECT_SOURCE_DIR}" "RXFLEET_BINARY_DIR=${CMAKE_BINARY_DIR}"
          "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=1" ${ARG_ENV})
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABEL}" TIMEOUT ${ARG_TIMEOUT}
                                          ENVIRONMENT "${env}")
endfunction()

# rxfleet_postgres_tests(TEST ...)
#   The tests need a PostgreSQL server: they get the ctest fixture "postgres" (one throwaway
#   server per build tree, started by tests/support/postgres-fixture before the first of them
#   and stopped after the last) and RXFLEET_TEST_PG_DIR, the directory of its Unix socket.
#   Each test creates its own databases there (tests/support/postgres.h).
function(rxfleet_postgres_tests)
  string(MD5 tree_hash "${CMAKE_BINARY_DIR}")
  string(SUBSTRING "${tree_hash}" 0 10 tree_hash)
  set(dir "/tmp/rxfleet-test-pg-${tree_hash}")
  get_property(defined GLOBAL PROPERTY RXFLEET_POSTGRES_FIXTURE)
  if(NOT defined)
    set_property(GLOBAL PROPERTY RXFLEET_POSTGRES_FIXTURE TRUE)
    set(script ${PROJECT_SOURCE_DIR}/tests/support/postgres-fixture)
    add_test(NAME postgres_fixture_start COMMAND ${script} start ${dir})
    add_test(NAME postgres_fixture_stop COMMAND ${script} stop ${dir})
    set_tests_properties(postgres_fixture_start PROPERTIES FIXTURES_SETUP postgres
                                                           LABELS fixture TIMEOUT 120)
    set_tests_properties(postgres_fixture_stop PROPERTIES FIXTURES_CLEANUP postgres
                                                          LABELS fixture TIMEOUT 60)
  endif()
  foreach(test ${ARGN})
    set_property(TEST ${test} APPEND PROPERTY FIXTURES_REQUIRED postgres)
    set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT "RXFLEET_TEST_PG_DIR=${dir}")
  endforeach()
endfunction()
