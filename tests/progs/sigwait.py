# sigwait.py: CPython's own test of a signal sent to a sleeping child (test_subprocess's
# test_send_signal): the child writes a line and sleeps; the parent reads the line and sends it
# SIGINT, which must end the sleep with KeyboardInterrupt at once, not when the sleep is over.
# Prints whether it did; "hung" when the child was still asleep after 50 s (then killed).
import signal
import subprocess
import sys

old = signal.signal(signal.SIGINT, signal.default_int_handler)
child = subprocess.Popen(
    [sys.executable, "-c", "import sys, time\nsys.stdout.write('x\\n')\nsys.stdout.flush()\ntime.sleep(600)\n"],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
signal.signal(signal.SIGINT, old)
child.stdout.read(1)
child.send_signal(signal.SIGINT)
try:
    _, err = child.communicate(timeout=50)
    print("interrupted:", b"KeyboardInterrupt" in err, "status:", child.returncode)
except subprocess.TimeoutExpired:
    child.kill()
    child.communicate()
    print("hung")
