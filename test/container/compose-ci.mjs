#!/usr/bin/env node
/**
 * Writes the CI variant of compose.yaml to stdout: the same services, volumes, health checks,
 * dependencies and restart policies, with every container on the host network (all traffic on
 * loopback, nothing published) and therefore each listener on its own free loopback port.
 * Usage: node test/container/compose-ci.mjs compose.yaml PG_PORT REDIS_PORT SERVE1_PORT SERVE2_PORT METRICS_PORT
 */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

const [file, pgPort, redisPort, serve1Port, serve2Port, metricsPort] = process.argv.slice(2);
const compose = parse(readFileSync(file, 'utf8'), { merge: true });
for (const [name, service] of Object.entries(compose.services)) {
  service.network_mode = 'host';
  delete service.ports;
  delete service.build;
  if (service.environment?.DATABASE_URL) {
    service.environment = {
      ...service.environment,
      DATABASE_URL: service.environment.DATABASE_URL.replace('@postgres:5432/', `@127.0.0.1:${pgPort}/`),
      REDIS_URL: `redis://127.0.0.1:${redisPort}`,
      HOST: '127.0.0.1',
      ...(name === 'serve-1' ? { PORT: serve1Port } : name === 'serve-2' ? { PORT: serve2Port } : {}),
      ...(name === 'worker' ? { METRICS_PORT: metricsPort } : {}),
    };
  }
}
compose.services.postgres.environment = { ...compose.services.postgres.environment, PGPORT: pgPort, POSTGRES_LISTEN: '127.0.0.1' };
compose.services.redis.command = [...compose.services.redis.command, '--port', redisPort, '--bind', '127.0.0.1'];
compose.services.redis.healthcheck.test = ['CMD', 'redis-cli', '-p', redisPort, 'ping'];
delete compose['x-store-api'];
// JSON is YAML too, and keeps "no" and "" strings (docker-compose reads YAML 1.1, where a plain no is false).
process.stdout.write(`${JSON.stringify(compose, null, 2)}\n`);
