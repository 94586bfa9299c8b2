// Pulumi serializes a dynamic provider's closure into the state and re-evaluates it in the
// provider host. ES-module imports captured by that closure cannot be serialized, so every
// provider here is a thin shell that captures only the URL of its implementation module and
// imports it inside each method (Node 24 strips the types of that .ts module when loaded).
import type * as pulumi from '@pulumi/pulumi';

export function lazyProvider(implUrl: string): pulumi.dynamic.ResourceProvider {
  return {
    async check(olds, news) {
      const impl = await import(implUrl);
      return impl.check ? impl.check(olds, news) : { inputs: news };
    },
    async diff(id, olds, news) {
      return (await import(implUrl)).diff(id, olds, news);
    },
    async create(inputs) {
      return (await import(implUrl)).create(inputs);
    },
    async read(id, props) {
      return (await import(implUrl)).read(id, props);
    },
    async update(id, olds, news) {
      return (await import(implUrl)).update(id, olds, news);
    },
    async delete(id, props) {
      return (await import(implUrl)).remove(id, props);
    },
  };
}
