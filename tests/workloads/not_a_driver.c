/* A library that is no CUDA driver, mapped under a driver's or a runtime's name only. */
int asys_test_not_a_driver(void) { return 0; }
