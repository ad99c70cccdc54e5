# Replay of the fuzz targets' committed inputs in an ordinary build (any compiler, no libFuzzer): included by
# tests/hardening/CMakeLists.txt, so the regressions run in the default test suite and under the ASan/UBSan and
# TSan builds. Each target is compiled with replay_main.cpp instead of libFuzzer's main.
#   fuzz_regressions.<target>   every file of tests/fuzz/regressions/<target>/ (must pass)
#   fuzz_seeds                  the seed corpora built from fixtures/ by make_seeds.sh (must pass)
#   fuzz_known_bugs.<target>    the regressions named kb-* with AGENTHOST_FUZZ_STRICT=1: inputs of reported bugs that
#                               are not fixed yet (the targets tolerate them by default). DISABLED until fixed; when a
#                               fix lands, this test must pass and the tolerance in the target can go.
set(AGENTHOST_FUZZ_DIR ${PROJECT_SOURCE_DIR}/tests/fuzz)
set(agenthost_fuzz_targets fuzz_line_framer fuzz_pi_mapper fuzz_pi_events fuzz_agent_mappers fuzz_cli_options
  fuzz_message_json fuzz_reaper_protocol)
set(agenthost_fuzz_seed_commands "")
foreach(t IN LISTS agenthost_fuzz_targets)
  set(exe agenthost_replay_${t})
  add_executable(${exe} ${AGENTHOST_FUZZ_DIR}/${t}.cpp ${AGENTHOST_FUZZ_DIR}/replay_main.cpp)
  target_link_libraries(${exe} PRIVATE agenthost::mapper agenthost::transport agenthost_build_flags)
  if(t STREQUAL "fuzz_cli_options")
    # options.cpp, and doctor.cpp and agents.cpp, which options.cpp uses (the agent names).
    target_sources(${exe} PRIVATE ${PROJECT_SOURCE_DIR}/cli/options.cpp)
    if(EXISTS ${PROJECT_SOURCE_DIR}/cli/doctor.cpp)
      target_sources(${exe} PRIVATE ${PROJECT_SOURCE_DIR}/cli/doctor.cpp ${PROJECT_SOURCE_DIR}/cli/agents.cpp)
    endif()
    target_include_directories(${exe} PRIVATE ${PROJECT_SOURCE_DIR}/cli)
    target_link_libraries(${exe} PRIVATE agenthost::providers)
  endif()
  if(t STREQUAL "fuzz_reaper_protocol")
    target_include_directories(${exe} PRIVATE ${PROJECT_SOURCE_DIR}/process/src)  # detail/reaper_protocol.hpp
  endif()
  add_test(NAME fuzz_regressions.${t} COMMAND ${exe} ${AGENTHOST_FUZZ_DIR}/regressions/${t})
  set_tests_properties(fuzz_regressions.${t} PROPERTIES TIMEOUT 300 LABELS fuzz)
  string(APPEND agenthost_fuzz_seed_commands " && $<TARGET_FILE:${exe}> \"$D/${t}\"")
  file(GLOB kb CONFIGURE_DEPENDS ${AGENTHOST_FUZZ_DIR}/regressions/${t}/kb-*)
  if(kb)
    add_test(NAME fuzz_known_bugs.${t} COMMAND ${CMAKE_COMMAND} -E env AGENTHOST_FUZZ_STRICT=1 $<TARGET_FILE:${exe}> ${kb})
    set_tests_properties(fuzz_known_bugs.${t} PROPERTIES DISABLED TRUE LABELS fuzz)
  endif()
endforeach()
add_test(NAME fuzz_seeds COMMAND bash -c
  "D=${CMAKE_CURRENT_BINARY_DIR}/fuzz-seeds && bash ${AGENTHOST_FUZZ_DIR}/make_seeds.sh \"$D\" ${agenthost_fuzz_seed_commands}")
set_tests_properties(fuzz_seeds PROPERTIES TIMEOUT 300 LABELS fuzz)
