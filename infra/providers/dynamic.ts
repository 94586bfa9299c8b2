// Pulumi serializes a dynamic provider's closure into the state and re-evaluates it in the
// provider host. ES-module imports captured by that closure cannot be serialized, so every
// provider here is a thin shell that captures only the URL of its implementation module and
// imports it inside each method (Node 24 strips the types of that .ts module when loaded).
// The import goes through `Function` so that no bundler or test runner rewrites it into a
// helper the closure would capture.
import type * as pulumi from '@pulumi/pulumi';

export function lazyProvider(implUrl: string): pulumi.dynamic.ResourceProvider {
  return {
    async check(olds, news) {
      const impl = await new Function('url', 'return import(url)')(implUrl);
      return impl.check ? impl.check(olds, news) : { inputs: news };
    },
    async diff(id, olds, news) {
      return (await new Function('url', 'return import(url)')(implUrl)).diff(id, olds, news);
    },
    async create(inputs) {
      return (await new Function('url', 'return import(url)')(implUrl)).create(inputs);
    },
    async read(id, props) {
      return (await new Function('url', 'return import(url)')(implUrl)).read(id, props);
    },
    async update(id, olds, news) {
      return (await new Function('url', 'return import(url)')(implUrl)).update(id, olds, news);
    },
    async delete(id, props) {
      return (await new Function('url', 'return import(url)')(implUrl)).remove(id, props);
    },
  };
}
