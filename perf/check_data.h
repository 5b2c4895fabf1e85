// Deterministic inputs and their expected results, shared by the perf
// binaries' #wrong column and the test suite. Every input is a small integer,
// so sums, products, minima and maxima are exact in every datatype and the
// reference does not depend on the order the library combined them in.
#pragma once

#include <cstddef>

#include "fairway/fairway.h"

namespace fairway::check {

size_t elementSize(fwDataType_t datatype);

// What rank contributes at element index (global across the whole buffer).
// seed varies the pattern between calls.
void fill(void* buf, fwDataType_t datatype, fwRedOp_t op, int rank, size_t firstIndex, size_t count, int seed);

// Expected elements firstIndex .. firstIndex+count of op over ranks 0..nranks-1.
void fillReduced(void* out, fwDataType_t datatype, fwRedOp_t op, int nranks, size_t firstIndex, size_t count,
                 int seed);

// What allgather (and gather's root) ends with: rank r's fill() of `each`
// elements from index 0, for r = 0 .. nranks-1, one block after another.
void fillGathered(void* out, fwDataType_t datatype, int nranks, size_t each, int seed);

// Elements of actual that differ from expected: exactly for integers,
// within a relative tolerance for floats (1e-2 half, bfloat16 and the fp8
// types, 1e-5 float, 1e-12 double: avg's division is the only inexact step).
size_t countWrong(const void* actual, const void* expected, fwDataType_t datatype, size_t count);

// Squared differences of actual from expected, and squares of expected,
// summed in double (a relative L2 error is sqrt(first / second)).
struct SquaredError {
  double error = 0;
  double reference = 0;
};
SquaredError squaredError(const void* actual, const void* expected, fwDataType_t datatype, size_t count);

// Makes element 0 of buf wrong in every datatype (flips its most
// significant byte), for tests that the check catches a bad result.
void corruptFirst(void* buf, fwDataType_t datatype);

}  // namespace fairway::check
