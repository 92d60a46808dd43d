def run(network, epochs):
    for _ in range(epochs):
        fit_once(network)
        network.eval()
        report(network)
