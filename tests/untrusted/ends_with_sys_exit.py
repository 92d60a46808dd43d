import sys

import tiny


def main():
    tiny.train()
    return 0


if __name__ == "__main__":
    sys.exit(main())
