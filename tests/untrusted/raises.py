import tiny


def load_config(path):
    raise FileNotFoundError(f"no config at {path}")


load_config("config.yaml")
tiny.train()
