import time

hoard = []
while True:
    hoard.append(bytearray(64 * 2**20))
    time.sleep(0.02)
