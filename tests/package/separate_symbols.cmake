# What a unit built with SEQPAR_SEPARATE_COMPILATION holds, read from its object file with nm:
# each of FUNCTIONS is referred to (an undefined symbol) and defined nowhere in it; no symbol
# it defines matches FORBIDDEN_DEFINED; no symbol at all matches FORBIDDEN (optional). The
# definitions are compiled once, in the program's unit of <seqpar/compiled.hpp> or
# <seqpar/compiled_cuda.hpp>.
#   package.separate.declarations_only: seqpar's input/output code, and no JSON code.
#   cuda_separate.declarations_only: Ops<Cuda>'s kernel-launching ops, and no kernel.
#
#   cmake -DNM=<nm> -DOBJECT=<file.o> -DFUNCTIONS=<name;...> -DFORBIDDEN_DEFINED=<regex>
#         [-DFORBIDDEN=<regex>] -P separate_symbols.cmake
execute_process(COMMAND "${NM}" -C "${OBJECT}" OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -C ${OBJECT} failed (${rc})")
endif()
string(REPLACE "\n" ";" lines "${symbols}")
set(problems "")
foreach(fn IN LISTS FUNCTIONS)
  set(used FALSE)
  foreach(line IN LISTS lines)
    # A function's name is followed by its parameters, its template arguments, or an ABI tag
    # (a function returning std::string: "name[abi:cxx11](...)").
    string(FIND "${line}" "${fn}(" call)
    string(FIND "${line}" "${fn}<" instance)
    string(FIND "${line}" "${fn}[abi:" tagged)
    if(call EQUAL -1 AND instance EQUAL -1 AND tagged EQUAL -1)
      continue()
    endif()
    if(line MATCHES "^ +U ")
      set(used TRUE)
    else()
      string(APPEND problems "\n  defined here: ${line}")
    endif()
  endforeach()
  if(NOT used)
    string(APPEND problems "\n  not referred to: ${fn}")
  endif()
endforeach()
foreach(line IN LISTS lines)
  if(line MATCHES "^[0-9a-f]+ [TtWwVv] " AND line MATCHES "${FORBIDDEN_DEFINED}")
    string(APPEND problems "\n  compiled here: ${line}")
  endif()
  if(FORBIDDEN AND line MATCHES "${FORBIDDEN}")
    string(APPEND problems "\n  present here: ${line}")
  endif()
endforeach()
if(problems)
  message(FATAL_ERROR "${OBJECT}:${problems}")
endif()
list(LENGTH FUNCTIONS n)
message(STATUS "${OBJECT}: ${n} functions referred to, none defined, nothing forbidden")
