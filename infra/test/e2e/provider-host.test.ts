// Our dynamic providers inside @pulumi/pulumi's real provider host (the process the engine starts
// for `pulumi-nodejs:dynamic` resources), driven over its gRPC interface: proves the serialized
// closures load the .ts implementation modules under Node 24 without the Pulumi CLI.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as pulumi from '@pulumi/pulumi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lazyProvider } from '../../providers/dynamic.ts';

const require = createRequire(import.meta.url);
const grpc = require('@grpc/grpc-js');
const provrpc = require('@pulumi/pulumi/proto/provider_grpc_pb');
const provproto = require('@pulumi/pulumi/proto/provider_pb');
const structproto = require('google-protobuf/google/protobuf/struct_pb');

let host: ChildProcess;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
let client: any;

beforeAll(async () => {
  host = spawn(process.execPath, [require.resolve('@pulumi/pulumi/cmd/dynamic-provider'), '127.0.0.1:1'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<string>((resolve) =>
    host.stdout!.once('data', (d) => resolve(String(d).trim())),
  );
  client = new provrpc.ResourceProviderClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
});
afterAll(() => host?.kill());

async function serialized(impl: string): Promise<string> {
  const provider = lazyProvider(new URL(`../../providers/${impl}`, import.meta.url).href);
  return (await pulumi.runtime.serializeFunction(() => provider, { allowSecrets: true })).text;
}

function call<T>(method: string, req: unknown): Promise<T> {
  return new Promise((resolve, reject) =>
    client[method](req, (err: Error | null, resp: T) => (err ? reject(err) : resolve(resp))),
  );
}

describe('dynamic provider host', () => {
  it('creates, reads and deletes a script through the serialized TargetFile provider', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kdgat-host-'));
    const path = join(dir, 'scripts', 'epilog.sh');
    const props = {
      __provider: await serialized('target-file.impl.ts'),
      connection: { kind: 'local' },
      path,
      content: 'echo hi\n',
      mode: '0755',
    };
    const urn = 'urn:pulumi:e2e::kdgat-hpc::pulumi-nodejs:dynamic/kdgat:TargetFile::f';

    const create = new provproto.CreateRequest();
    create.setUrn(urn);
    create.setProperties(structproto.Struct.fromJavaScript(props));
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const created: any = await call('create', create);
    expect(created.getId()).toBe(`local:${path}`);
    expect(readFileSync(path, 'utf8')).toBe('echo hi\n');
    expect(statSync(path).mode & 0o777).toBe(0o755);
    const outs = created.getProperties().toJavaScript();
    expect(outs.sha256).toMatch(/^[0-9a-f]{64}$/);

    const read = new provproto.ReadRequest();
    read.setId(created.getId());
    read.setUrn(urn);
    read.setProperties(structproto.Struct.fromJavaScript(outs));
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const live: any = await call('read', read);
    expect(live.getProperties().toJavaScript().content).toBe('echo hi\n');

    const del = new provproto.DeleteRequest();
    del.setId(created.getId());
    del.setUrn(urn);
    del.setProperties(structproto.Struct.fromJavaScript(outs));
    await call('delete', del);
    expect(existsSync(path)).toBe(false);
  });
});
