import { describe, expect, it } from 'vitest';
import { isPrivateAddress, validateWebhookUrl } from '../../src/webhooks/webhook-url-policy.ts';

const publicResolver = async () => ['93.184.216.34'];

describe('webhook URL policy', () => {
  it.each([
    '127.0.0.1',
    '127.8.8.8',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::1',
    '::',
    'fe80::1',
    'fd00::1',
    'fc12::3',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '64:ff9b::10.0.0.1',
    '[::1]',
  ])('refuses private address %s', (address) => {
    expect(isPrivateAddress(address)).toBe(true);
  });

  // IPv6 spellings that carry a private IPv4 address (as written, and as the URL parser rewrites them).
  it.each([
    ['IPv4-compatible', '::127.0.0.1'],
    ['IPv4-compatible, hex', '::7f00:1'],
    ['IPv4-compatible private', '::a00:1'],
    ['IPv4-mapped, hex', '::ffff:a9fe:a9fe'],
    ['IPv4-mapped, expanded', '0:0:0:0:0:ffff:7f00:1'],
    ['IPv4-translated', '::ffff:0:7f00:1'],
    ['NAT64', '64:ff9b::7f00:1'],
    ['NAT64, dotted', '64:ff9b::192.168.0.1'],
    ['NAT64 local-use', '64:ff9b:1::a00:1'],
    ['6to4', '2002:7f00:1::'],
    ['6to4 private', '2002:c0a8:101::1'],
    ['Teredo, client 127.0.0.1', '2001:0:4136:e378:8000:63bf:80ff:fffe'],
    ['zone id', 'fe80::1%eth0'],
    ['documentation', '2001:db8::1'],
    ['multicast', 'ff02::1'],
    ['discard', '100::1'],
  ])('refuses %s %s', (_form, address) => {
    expect(isPrivateAddress(address)).toBe(true);
  });

  it.each(['93.184.216.34', '8.8.8.8', '172.32.0.1', '2606:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1'])(
    'accepts public address %s',
    (address) => {
      expect(isPrivateAddress(address)).toBe(false);
    },
  );

  it('accepts public http and https URLs', async () => {
    await expect(validateWebhookUrl('https://hooks.example.com/in?x=1', false, publicResolver)).resolves.toBe('https://hooks.example.com/in?x=1');
    await expect(validateWebhookUrl('http://93.184.216.34:8080/h', false, publicResolver)).resolves.toBe('http://93.184.216.34:8080/h');
  });

  it.each([
    ['ftp://example.com/x', /scheme/],
    ['not a url', /absolute/],
    ['https://user:pw@example.com/', /credentials/],
    ['http://127.0.0.1:3000/hook', /private/],
    ['http://[::1]/hook', /private/],
    ['http://localhost:3000/hook', /private/],
    ['http://169.254.169.254/latest/meta-data', /private/],
    ['http://[::127.0.0.1]/hook', /private/],
    ['http://[::ffff:7f00:1]/hook', /private/],
    ['http://[64:ff9b::127.0.0.1]/hook', /private/],
    ['http://[2002:a9fe:a9fe::]/latest/meta-data', /private/],
  ])('refuses %s', async (url, reason) => {
    await expect(validateWebhookUrl(url, false, publicResolver)).rejects.toThrow(reason);
  });

  it('refuses hostnames that resolve to a private address, or to nothing', async () => {
    await expect(validateWebhookUrl('https://internal.example.com/', false, async () => ['10.0.0.5'])).rejects.toThrow(/resolves to a private/);
    await expect(validateWebhookUrl('https://split.example.com/', false, async () => ['93.184.216.34', '127.0.0.1'])).rejects.toThrow(/private/);
    await expect(validateWebhookUrl('https://mapped.example.com/', false, async () => ['::ffff:7f00:1'])).rejects.toThrow(/private/);
    await expect(validateWebhookUrl('https://nat64.example.com/', false, async () => ['64:ff9b::a00:5'])).rejects.toThrow(/private/);
    await expect(
      validateWebhookUrl('https://nx.example.com/', false, async () => {
        throw new Error('ENOTFOUND');
      }),
    ).rejects.toThrow(/does not resolve/);
  });

  it('allows private targets when the deployment says so (WEBHOOK_ALLOW_PRIVATE_URLS=true), never other schemes', async () => {
    await expect(validateWebhookUrl('http://127.0.0.1:3000/hook', true)).resolves.toBe('http://127.0.0.1:3000/hook');
    await expect(validateWebhookUrl('file:///etc/passwd', true)).rejects.toThrow(/scheme/);
  });
});
