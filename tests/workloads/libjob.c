/* A library with one function, for a program to load and unload. */
int job_control_lib(void) { return 1; }
