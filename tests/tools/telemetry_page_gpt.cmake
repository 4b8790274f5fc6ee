# Trains the GPT example for STEPS steps (300 unless given) with --csv, writes `mpc compile
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
if(NOT DEFINED STEPS)
  set(STEPS 300)
endif()
run(${TRAIN} --steps=${STEPS} --log-every=100 --sample=0 --csv=${DIR}/run.csv)
# EXPECT_COLUMN: a column the app must have written (its series is checked).
if(DEFINED EXPECT_COLUMN)
  file(STRINGS ${DIR}/run.csv header LIMIT_COUNT 1)
  string(REPLACE "," ";" header "${header}")
  list(FIND header ${EXPECT_COLUMN} at)
  if(at EQUAL -1)
    message(FATAL_ERROR "run.csv has no ${EXPECT_COLUMN} column: ${header}")
  endif()
endif()
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
