# CTest no_outside_paths: fails when a test source, a test CMakeLists or the test scripts reach
# outside the repository (the ../shared checkout beside our trees, an absolute /work path, the
# source root's parent). Tests read copied data under tests/data/ (tests/data/shared/README.md).
# Usage: cmake -DROOT=<repository root> -P tests/no_outside_paths.cmake
if(NOT ROOT)
  message(FATAL_ERROR "no_outside_paths: pass -DROOT=<repository root>")
endif()
file(GLOB_RECURSE files LIST_DIRECTORIES false
  "${ROOT}/tests/*.cpp" "${ROOT}/tests/*.cu" "${ROOT}/tests/*.h" "${ROOT}/tests/*.sh" "${ROOT}/tests/*.py"
  "${ROOT}/tests/*.mjs" "${ROOT}/tests/*.js" "${ROOT}/tests/*CMakeLists.txt" "${ROOT}/tests/*.cmake")
list(FILTER files EXCLUDE REGEX "/tests/(data|oracles/node_modules|oracles/packages)/")
list(FILTER files EXCLUDE REGEX "/tests/no_outside_paths\\.cmake$")
list(APPEND files "${ROOT}/CMakeLists.txt" "${ROOT}/scripts/test.sh" "${ROOT}/scripts/fuzz.sh"
  "${ROOT}/scripts/build.sh" "${ROOT}/scripts/setup.sh" "${ROOT}/scripts/gpu/cuda_only/CMakeLists.txt")
set(patterns "\\.\\./shared" "FRUGAL_SHARED_DIR" "shared_dir\\(" "\"/work/"
  "source_root\\(\\)[^;]*\"/\\.\\.")
set(bad "")
foreach(f IN LISTS files)
  if(NOT EXISTS "${f}")
    continue()
  endif()
  file(STRINGS "${f}" lines)
  set(n 0)
  foreach(line IN LISTS lines)
    math(EXPR n "${n} + 1")
    foreach(p IN LISTS patterns)
      if(line MATCHES "${p}")
        file(RELATIVE_PATH rel "${ROOT}" "${f}")
        string(APPEND bad "  ${rel}:${n}: matches '${p}': ${line}\n")
      endif()
    endforeach()
  endforeach()
endforeach()
list(LENGTH files count)
if(bad)
  message(FATAL_ERROR "no_outside_paths: tests must read only files inside the repository "
    "(copy data under tests/data/ with its provenance line):\n${bad}")
endif()
message(STATUS "no_outside_paths: ${count} files checked, none reads outside the repository")
