import os

import tiny

tiny.train()
print("trained; leaving without Python's shutdown")
os._exit(0)
