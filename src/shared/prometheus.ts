/**
 * Declaring a Prometheus metric, once per process, in prom-client's default registry (the one
 * `/metrics` exposes, ops/metrics.ts): a module evaluated twice (test runners, two loaders) gets the
 * metric already registered under that name instead of prom-client's "already registered" error.
 * Every layer declares its metrics with these (webhooks, retention, ops).
 */
import client from 'prom-client';

function once<T extends client.Metric<string>>(name: string, create: () => T): T {
  return (client.register.getSingleMetric(name) as T | undefined) ?? create();
}

export function counter<L extends string = never>(configuration: client.CounterConfiguration<L>): client.Counter<L> {
  return once(configuration.name, () => new client.Counter<L>(configuration));
}

export function gauge<L extends string = never>(configuration: client.GaugeConfiguration<L>): client.Gauge<L> {
  return once(configuration.name, () => new client.Gauge<L>(configuration));
}

export function histogram<L extends string = never>(configuration: client.HistogramConfiguration<L>): client.Histogram<L> {
  return once(configuration.name, () => new client.Histogram<L>(configuration));
}
