import sys

line = "x" * 1023 + "\n"
for _ in range(25 * 1024):  # 25 MB
    sys.stdout.write(line)
raise RuntimeError("done flooding")
