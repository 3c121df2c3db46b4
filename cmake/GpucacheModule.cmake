# gpucache_add_module(NAME SOURCES ... [SUBDIRS dir...] [DEPENDS target...] [PRIVATE_DEPENDS target...])
#
# One static library per module (docs/architecture.md), named gpucache_NAME with the alias
# gpucache::NAME. Headers the module offers to others live in NAME/include/ and reach only the
# targets that link the module; everything else in the folder is private to it. So a module can
# include only the headers of the modules it links, and a stray include fails to build.
function(gpucache_add_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;SUBDIRS;DEPENDS;PRIVATE_DEPENDS" ${ARGN})
  set(target gpucache_${name})
  add_library(${target} STATIC ${ARG_SOURCES})
  add_library(gpucache::${name} ALIAS ${target})
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>)
  endif()
  # SUBDIRS: the module's folders by job; their private headers are included by bare name, as
  # file names are unique across src/.
  list(TRANSFORM ARG_SUBDIRS PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${ARG_SUBDIRS})
  target_link_libraries(${target} PUBLIC ${ARG_DEPENDS} PRIVATE ${ARG_PRIVATE_DEPENDS})
  target_compile_options(${target} PRIVATE ${GPUCACHE_WARNING_FLAGS})
  # Modules end up inside the runtime's shared library and the Python extension: nothing of theirs
  # is exported unless a public API marks it so.
  set_target_properties(${target} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  set_property(GLOBAL APPEND PROPERTY GPUCACHE_MODULE_DIRS ${CMAKE_CURRENT_SOURCE_DIR} ${ARG_SUBDIRS})
endfunction()
