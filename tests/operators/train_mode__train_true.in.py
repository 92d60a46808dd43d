def run(network, epochs):
    for _ in range(epochs):
        network.train(True)
        fit_once(network)
        network.eval()
        report(network)
