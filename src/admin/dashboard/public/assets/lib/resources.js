/**
 * The token scopes and webhook event types the service has, from GET /admin/api/v1/resources
 * (derived there from the resource declarations): fetched once per page load.
 */
import { get } from './api.js';

let loading = null;

/** { scopes: [{ value, label, hint }], event_groups: [{ label, types }] } */
export function loadResources() {
  if (!loading) {
    loading = get('/resources').then(
      (body) => body.data,
      (error) => {
        loading = null;
        throw error;
      },
    );
  }
  return loading;
}
