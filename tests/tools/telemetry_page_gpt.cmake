# Trains the GPT example for 300 steps with --csv, writes `mpc compile
# --report` for the same model (MODEL_OPTIONS), renders the telemetry page
# and checks it.
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()
run(${TRAIN} --steps=300 --log-every=100 --sample=0 --csv=${DIR}/run.csv)
separate_arguments(MODEL_OPTIONS)
execute_process(COMMAND ${MPC} compile ${MODEL} ${MODEL_OPTIONS} --report -o ${DIR}/gpt.o
                OUTPUT_FILE ${DIR}/report.txt RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpc compile --report failed (${rc})")
endif()
run(${PYTHON} ${TOOL} ${DIR}/run.csv --report ${DIR}/report.txt
    --title gpt -o ${DIR}/page.html)
run(${PYTHON} ${CHECKER} ${DIR}/page.html --csv ${DIR}/run.csv
    --report ${DIR}/report.txt --title gpt)
