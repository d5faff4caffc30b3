# cuda_separate.declarations_only: the object file of a unit that uses Ops<Cuda> under
# SEQPAR_SEPARATE_COMPILATION, compiled by the host compiler, refers to the ops that launch
# kernels (a GEMM, layernorm, attention, the cross-entropy, AdamW) without defining any op of
# Ops<Cuda>'s kernel set, and holds no kernel: no launch, no registration with the runtime.
# Those are compiled once, in the program's unit of <seqpar/compiled_cuda.hpp>.
#
#   cmake -DNM=<nm> -DOBJECT=<file.o> -P declarations_only.cmake
execute_process(COMMAND "${NM}" -C "${OBJECT}" OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -C ${OBJECT} failed (${rc})")
endif()
string(REPLACE "\n" ";" lines "${symbols}")
set(expected gemm layernorm_forward flash_attention_forward softmax_stats cross_entropy_grad
             embedding_backward)
set(problems "")
set(referred 0)
foreach(op IN LISTS expected)
  set(used FALSE)
  foreach(line IN LISTS lines)
    if(line MATCHES "^ +U .*Ops<seqpar::v0::Cuda>::${op}<")
      set(used TRUE)
    endif()
  endforeach()
  if(NOT used)
    string(APPEND problems "\n  not referred to: Ops<Cuda>::${op}")
  endif()
endforeach()
foreach(line IN LISTS lines)
  if(line MATCHES "^ +U .*Ops<seqpar::v0::Cuda>::")
    math(EXPR referred "${referred} + 1")
  elseif(line MATCHES "^[0-9a-f]+ [TtWwVv] .*Ops<seqpar::v0::Cuda>::(gemm|add_bias|column_sum|layernorm_|gelu_|embedding_|add<|scale|fill|sum_squares|convert|adamw|attention_|flash_attention_|kv_|decode_attention|gather_rows|scatter_rows|softmax_stats|cross_entropy_)")
    string(APPEND problems "\n  an op compiled here: ${line}")
  endif()
  if(line MATCHES "cudaLaunchKernel|__cudaRegisterFunction|__device_stub")
    string(APPEND problems "\n  kernel code here: ${line}")
  endif()
endforeach()
if(problems)
  message(FATAL_ERROR "${OBJECT}:${problems}")
endif()
message(STATUS "${OBJECT}: ${referred} ops of Ops<Cuda> referred to, none defined, no kernel")
