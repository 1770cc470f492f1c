# Registers a domain and a string, says ready, and on a line pushes ranges named by early and late strings.
import nvtx, sys
d = nvtx.get_domain("early-domain")
d.get_registered_string("registered-early")
print("ready", flush=True)
sys.stdin.readline()
# The domain's messages are its registered strings: the first is the one
# registered above (cached), the second is registered here.
d.push_range(d.get_event_attributes(message="registered-early"))
d.pop_range()
d.push_range(d.get_event_attributes(message="registered-late"))
d.pop_range()
print("done", flush=True)
sys.stdin.readline()
