/* The small library the soak workload loads and unloads every second, so
 * that a long run keeps showing asys new mappings (each load is a new
 * mapping to scan and a module to record). */
int soak_plugin_value(int x);

int soak_plugin_value(int x) {
    return x * 2 + 1;
}
