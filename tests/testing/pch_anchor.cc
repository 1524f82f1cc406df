// The translation unit that builds the unit tests' precompiled header (tests/CMakeLists.txt).
