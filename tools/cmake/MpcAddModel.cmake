#===- tools/cmake/MpcAddModel.cmake - mpc_add_model() ---------------------===#
#
# The one definition of mpc_add_model, for this repository's build (the root
# CMakeLists.txt) and for projects that use an installed mpc
# (find_package(mpc): mpcConfig.cmake). Whoever includes it sets first:
#   MPC_COMPILER_TARGET     the mpc executable's target (mpc, or mpc::mpc)
#   MPC_COMPILER_DEPENDS    what a model's build depends on for it (the
#                           target in-tree, the installed file otherwise)
#   MPC_RUNTIME_TARGET      libmpcrt's target (mpcrt, or mpc::runtime)
#   MPC_RUNTIME_HEADER_DIR  the runtime/ directory generated code includes
# and may set MPC_GENERATED_CXXFLAGS, flags for the generated code
# (`mpc compile` reads them from $CXXFLAGS), e.g. the sanitizers'.
#
# mpc_add_model(<target> <file.mlir> [OPTIONS <mpc compile option>...])
#
# Compiles the model in <file.mlir> with `mpc compile` (cpu target unless
# OPTIONS say otherwise) into ${CMAKE_CURRENT_BINARY_DIR}/<target>/ and
# defines <target>: an imported static library (lib<model>.a) that carries
# the include directory of <model>.h and links libmpcrt. The model's name
# (`mpc.model @<model>`) is read from the file and kept in the target's
# property MPC_MODEL_NAME, for apps built with -DMPC_MODEL=<model>:
#
#   mpc_add_model(example_mlp ${PROJECT_SOURCE_DIR}/examples/mlp.mlir)
#   target_link_libraries(train_mlp PRIVATE example_mlp)
#
# The library is rebuilt when the model, `mpc` or a runtime header that the
# generated code includes changes. Generated code is compiled with this
# build's C++ compiler and archiver ($CXX and $AR for `mpc compile`).
#===----------------------------------------------------------------------===#

include_guard(GLOBAL)

function(mpc_add_model target file)
  cmake_parse_arguments(PARSE_ARGV 2 ARG "" "" "OPTIONS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "mpc_add_model(${target}): unexpected arguments "
                        "'${ARG_UNPARSED_ARGUMENTS}'; use OPTIONS <option>...")
  endif()
  get_filename_component(file "${file}" ABSOLUTE)
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR "mpc_add_model(${target}): no file ${file}")
  endif()
  # Renaming the model renames the library and header: configure again.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${file}")
  file(STRINGS "${file}" model_lines
       REGEX "^[ \t]*mpc\\.model[ \t]+@[A-Za-z0-9_]+")
  list(LENGTH model_lines model_count)
  if(NOT model_count EQUAL 1)
    message(FATAL_ERROR "mpc_add_model(${target}): expected one "
                        "'mpc.model @<name>' line in ${file}, found "
                        "${model_count}")
  endif()
  string(REGEX MATCH "@([A-Za-z0-9_]+)" unused "${model_lines}")
  set(name "${CMAKE_MATCH_1}")

  set(dir "${CMAKE_CURRENT_BINARY_DIR}/${target}")
  # An imported target's include directory must exist when CMake generates.
  file(MAKE_DIRECTORY "${dir}")
  file(GLOB runtime_headers CONFIGURE_DEPENDS
       "${MPC_RUNTIME_HEADER_DIR}/*.h"
       "${MPC_RUNTIME_HEADER_DIR}/*.inc"
       "${MPC_RUNTIME_HEADER_DIR}/device/*"
       "${MPC_RUNTIME_HEADER_DIR}/cuda/*.h")
  add_custom_command(
    OUTPUT "${dir}/lib${name}.a" "${dir}/${name}.h" "${dir}/${name}.cpp"
           "${dir}/${name}_kernels.cu"
    COMMAND ${CMAKE_COMMAND} -E env "CXX=${CMAKE_CXX_COMPILER}"
            "AR=${CMAKE_AR}" "CXXFLAGS=${MPC_GENERATED_CXXFLAGS}"
            $<TARGET_FILE:${MPC_COMPILER_TARGET}> compile "${file}" -o "${dir}"
            ${ARG_OPTIONS}
    DEPENDS ${MPC_COMPILER_DEPENDS} "${file}" ${runtime_headers}
    COMMENT "Compiling model @${name} with mpc (${target})"
    VERBATIM)
  add_custom_target(${target}-compile
    DEPENDS "${dir}/lib${name}.a" "${dir}/${name}.h")
  add_library(${target} STATIC IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES
    IMPORTED_LOCATION "${dir}/lib${name}.a"
    INTERFACE_INCLUDE_DIRECTORIES "${dir}"
    INTERFACE_LINK_LIBRARIES ${MPC_RUNTIME_TARGET}
    MPC_MODEL_NAME "${name}"
    MPC_MODEL_DIR "${dir}")
  add_dependencies(${target} ${target}-compile)
endfunction()
