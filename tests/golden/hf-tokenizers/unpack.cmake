# The bundled model vocabularies (tokenizers/*/tokenizer.json) are kept in the repository as
# tokenizer.json.tar.xz, byte-identical inside, and unpacked next to it at configure time
# (git ignores the unpacked file). The archives keep the repository small, and its text free of
# the words real vocabularies hold as tokens (code-comment markers among them).
# tests/text/tokenizer_provenance.py checks every unpacked file against the upstream sha256 in
# its folder's SOURCE.txt.
file(GLOB _gridfeed_vocabularies
     "${CMAKE_CURRENT_LIST_DIR}/tokenizers/*/tokenizer.json.tar.xz")
foreach(_archive IN LISTS _gridfeed_vocabularies)
  get_filename_component(_folder "${_archive}" DIRECTORY)
  set(_unpacked "${_folder}/tokenizer.json")
  if(NOT EXISTS "${_unpacked}" OR "${_archive}" IS_NEWER_THAN "${_unpacked}")
    get_filename_component(_name "${_folder}" NAME)
    set(_scratch "${CMAKE_BINARY_DIR}/vocabulary-unpack/${_name}")
    file(REMOVE_RECURSE "${_scratch}")
    file(ARCHIVE_EXTRACT INPUT "${_archive}" DESTINATION "${_scratch}")
    if(NOT EXISTS "${_scratch}/tokenizer.json")
      message(FATAL_ERROR "${_archive} holds no tokenizer.json")
    endif()
    # Into place by a rename, so an interrupted configure leaves no half-written vocabulary.
    file(COPY_FILE "${_scratch}/tokenizer.json" "${_unpacked}.part")
    file(RENAME "${_unpacked}.part" "${_unpacked}")
    file(TOUCH "${_unpacked}")  # the archive holds mtime 0: newer than it from now on
    file(REMOVE_RECURSE "${_scratch}")
  endif()
endforeach()
