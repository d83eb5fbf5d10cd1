/**
 * A software passkey authenticator for API tests: an ES256 (P-256) key per credential, the
 * authenticator data, client data and 'none' attestation built here by hand, as a browser and a
 * platform authenticator would, so the server's WebAuthn checks run on real signatures. Each answer
 * can be bent on purpose (another origin, no user verification, a counter gone back, a signature
 * of other data) to see the server refuse it.
 */
import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { isoCBOR } from '@simplewebauthn/server/helpers';

const b64url = (bytes: Uint8Array | Buffer) => Buffer.from(bytes).toString('base64url');

export interface SoftCredential {
  id: string;
  privateKey: KeyObject;
  counter: number;
  userHandle: string;
}

export interface Bend {
  origin?: string;
  rpId?: string;
  userVerified?: boolean;
  /** The signature counter to report (default: one more than the last). */
  counter?: number;
  /** Sign other bytes than the ones sent (a forged signature). */
  forgeSignature?: boolean;
  /** The challenge to sign instead of the options' one. */
  challenge?: string;
  userHandle?: string | null;
}

export class SoftAuthenticator {
  readonly credentials: SoftCredential[] = [];
  constructor(
    readonly rpId: string,
    readonly origin: string,
  ) {}

  private authData(rpId: string, flags: number, counter: number, attested?: Buffer): Buffer {
    const count = Buffer.alloc(4);
    count.writeUInt32BE(counter);
    return Buffer.concat([createHash('sha256').update(rpId).digest(), Buffer.from([flags]), count, attested ?? Buffer.alloc(0)]);
  }

  private clientData(type: string, challenge: string, origin: string): Buffer {
    return Buffer.from(JSON.stringify({ type, challenge, origin, crossOrigin: false }));
  }

  /** Answers the options of navigator.credentials.create() with a new credential. */
  register(options: { challenge: string; user: { id: string } }, bend: Bend = {}) {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const jwk = publicKey.export({ format: 'jwk' });
    const cose = isoCBOR.encode(
      new Map<number, number | Uint8Array>([
        [1, 2],
        [3, -7],
        [-1, 1],
        [-2, Buffer.from(jwk.x!, 'base64url')],
        [-3, Buffer.from(jwk.y!, 'base64url')],
      ]),
    );
    const credentialId = randomBytes(16);
    const idLength = Buffer.alloc(2);
    idLength.writeUInt16BE(credentialId.length);
    const attested = Buffer.concat([Buffer.alloc(16), idLength, credentialId, Buffer.from(cose)]);
    const uv = bend.userVerified ?? true;
    const authData = this.authData(bend.rpId ?? this.rpId, 0x01 | (uv ? 0x04 : 0) | 0x40, 0, attested);
    const attestationObject = isoCBOR.encode(
      new Map<string, string | Map<string, string> | Uint8Array>([
        ['fmt', 'none'],
        ['attStmt', new Map<string, string>()],
        ['authData', authData],
      ]),
    );
    const id = b64url(credentialId);
    const credential: SoftCredential = { id, privateKey, counter: 0, userHandle: options.user.id };
    this.credentials.push(credential);
    return {
      credential,
      response: {
        id,
        rawId: id,
        type: 'public-key' as const,
        response: {
          clientDataJSON: b64url(this.clientData('webauthn.create', bend.challenge ?? options.challenge, bend.origin ?? this.origin)),
          attestationObject: b64url(attestationObject),
          transports: ['internal'],
        },
        authenticatorAttachment: 'platform',
        clientExtensionResults: {},
      },
    };
  }

  /** Answers the options of navigator.credentials.get() with `credential` (default: the last made). */
  assert(options: { challenge: string }, credential = this.credentials.at(-1)!, bend: Bend = {}) {
    const counter = bend.counter ?? credential.counter + 1;
    credential.counter = Math.max(credential.counter, counter);
    const uv = bend.userVerified ?? true;
    const authData = this.authData(bend.rpId ?? this.rpId, 0x01 | (uv ? 0x04 : 0), counter);
    const clientData = this.clientData('webauthn.get', bend.challenge ?? options.challenge, bend.origin ?? this.origin);
    const signed = Buffer.concat([authData, createHash('sha256').update(clientData).digest()]);
    const signature = sign('sha256', bend.forgeSignature ? Buffer.concat([signed, Buffer.from([1])]) : signed, credential.privateKey);
    const userHandle = bend.userHandle === undefined ? credential.userHandle : bend.userHandle;
    return {
      id: credential.id,
      rawId: credential.id,
      type: 'public-key' as const,
      response: {
        clientDataJSON: b64url(clientData),
        authenticatorData: b64url(authData),
        signature: b64url(signature),
        ...(userHandle === null ? {} : { userHandle }),
      },
      authenticatorAttachment: 'platform',
      clientExtensionResults: {},
    };
  }
}
