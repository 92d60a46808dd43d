import itertools

for i in itertools.count():
    print(f"still going {i}")
