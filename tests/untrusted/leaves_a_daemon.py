import subprocess
import sys

import tiny

subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)  # kata-untrusted-daemon"],
                 start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
tiny.train(epochs=1)
