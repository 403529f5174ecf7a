/* CHECK / CHECK_OK for the C API test programs: count failures instead of aborting, so
 * one run reports every failed check. Each program includes this once. */
#ifndef DETINFER_TESTS_CAPI_CHECK_H_
#define DETINFER_TESTS_CAPI_CHECK_H_

#include <stdio.h>

#include "detinfer/c_api.h"

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

#define CHECK_OK(expr)                                                          \
  do {                                                                          \
    dti_status st_ = (expr);                                                    \
    if (st_ != DTI_OK) {                                                        \
      fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #expr, \
              dti_status_name(st_), dti_last_error());                          \
      ++failures;                                                               \
    }                                                                           \
  } while (0)

#endif /* DETINFER_TESTS_CAPI_CHECK_H_ */
